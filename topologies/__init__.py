"""Machine descriptions as data files, one per machine (schema: pkbsim/timing/schema.py; loader:
pkbsim/timing/topology.py). Every file lists the sources of its numbers."""
