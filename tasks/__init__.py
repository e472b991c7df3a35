"""The benchmark suite: the Task API (api.py), the registry (registry.py) and one module per task,
grouped by category in sub-packages. Depends on nothing else of pkb."""
