"""API-Bank (Li et al., 2023), written from our SPEC.md of the benchmark: the call syntax (``calls``), the
simulated APIs (``tools``) and the scoring of API items (``scoring``). The data stays where the user keeps it
(``--data``: a folder with ``init_database/``, ``lv1-lv2-samples/`` and ``test-data/``)."""
