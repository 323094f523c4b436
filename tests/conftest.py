pytest_plugins: list[str] = []  # the kemu plugin is registered through its pytest11 entry point
