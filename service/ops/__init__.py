"""Keeping a process observable and stoppable: metrics, stack dumps and the watchdog, the probe
server, the container health check, bounded awaits."""
