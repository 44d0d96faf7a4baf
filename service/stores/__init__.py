"""What lives in Redis besides the job stream: the connection, key names, API keys and tenants,
calibrations."""
