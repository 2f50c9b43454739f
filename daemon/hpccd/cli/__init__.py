"""`hpccctl`: the command line, its error handling, completion, man page and the replay demo."""
