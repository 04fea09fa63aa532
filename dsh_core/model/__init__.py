"""The model: the seam every chat model implements (:mod:`.seam`), and the DeepSeek adapter
behind it (httpx, the wire format, SSE, classifying failures).

May import: the top-level leaves (``errors``, ``chain``, ``masking``, ``clock``, ``version``).
"""
