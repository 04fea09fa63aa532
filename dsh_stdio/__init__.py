"""dsh_stdio: the front door. A prompt_toolkit REPL on a terminal, a plain line reader on a pipe.

It only drives :mod:`dsh_core` and renders what it reports.
"""
