"""The product shell: the `pkb` command (cli/), batch runs (batch.py), reports (report/) and the corpus harness.

It sits above the libraries it drives: pkbsim (the simulator and the screen) and hwbackend (scoring on GPUs),
which are peers and import nothing of it. Library code raises library errors; pkb/cli/main.py alone turns
them into exit codes.
"""
