"""The web (SPEC 16): ``web_fetch`` reads a page, ``web_search`` asks DeepSeek to search.

- :mod:`.fetch`: the page, fetched by dsh itself (httpx, no cookies, no key), capped, as text.
- :mod:`.addresses`: where a fetch may connect, checked on the address it connects to.
- :mod:`.markdown`: HTML as Markdown, for the model to read.
- :mod:`.search`: DeepSeek's Messages API with its ``web_search`` server tool, results listed.
"""
