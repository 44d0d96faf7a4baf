"""Helpers shared by test modules: fakes of pure logic, the Prometheus text reader, the
cluster and remote-engine process sets, the queue's test jobs. Fixtures stay in conftest
files; test modules import helpers from here, never from conftest or from one another."""
