"""TravelPlanner (Xie et al., 2024), written from our SPEC.md of the benchmark: the sandbox tables
(``sandbox``) and the constraint evaluator with its pass rates (``constraints``). The data stays where the
user keeps it (``--data``: the folder holding ``database/``)."""
