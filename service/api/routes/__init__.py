"""Thin routers, one module per resource: parse, authorise, submit, map the result."""
