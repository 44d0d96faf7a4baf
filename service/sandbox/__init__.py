"""Running untrusted code: an isolated, bounded process per run (docs/reliability.md).

``isolation`` builds the command that confines one run and checks, at start, that the host
can confine it (fail closed); ``runner`` runs programs through a pool with a concurrency cap.
"""
