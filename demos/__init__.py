"""End-to-end demos: the entry scripts and tools run one after the other as a user runs
them (subprocesses), timed, with a summary. Imports only core/: what it shows is the
command line, not the library."""
