"""What a bus and a platform are told: the registry, who I am, credentials, who receives."""
