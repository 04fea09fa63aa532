"""Walking a tree for ``glob`` and ``grep``: the walk and what it leaves out (:mod:`.walk`),
glob patterns (:mod:`.globs`), and a long walk divided among processes (:mod:`.divided`)."""
