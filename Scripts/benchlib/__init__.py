"""The modules of Scripts/bench (see its --help): common.py, the pieces every part uses;
events.py, the events workload."""
