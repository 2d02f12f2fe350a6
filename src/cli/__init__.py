"""The `artifactflow` command line: a thin layer over `artifactflow.Client`.

`main` is the entry point and `commands_*` hold the commands, `session` drives a run through
its permission pauses, `render` draws events, `approvals` asks for (or parses) decisions,
`views` prints stored data, `interrupts` turns Ctrl-C and SIGTERM into a clean cancel, `options`
carries the global options, and `exitcodes` lists the exit codes scripts can rely on.
"""
