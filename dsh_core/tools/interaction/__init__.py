"""Tools whose other end is the person (SPEC 16): the checklist they watch, the question they
answer.

- :mod:`.todo`: ``todo_write``, the model's working checklist, kept in the log (``todo/write``)
  and shown by the front door whenever it changes.
- :mod:`.ask`: ``ask_user_question``, asked through the front door's one question machinery
  (a :data:`~.ask.UserAsker`); where nobody can be asked, an ``Error:`` result says so.
"""
