"""The reproduction of the paper's simulation comparisons: docs/results.md (``cli.py`` runs it).

``studies`` says what each section simulates, ``runner`` simulates it through a cache, ``render``
(with ``fairness`` and ``profile_studies`` for sections 9, 6 and 7) writes the document.
"""
