"""A registry kept as a class-level stack that a context manager pushes on enter and pops on exit (the
shape of tyro's ConstructorRegistry): in a real launch each rank process has its own list. Imported by the
program in tests/test_torch_programs.py."""


class Registry:
    _active: list = []

    def __enter__(self):
        Registry._active.append(self)
        return self

    def __exit__(self, *exc):
        top = Registry._active.pop()
        assert top is self, "popped another rank's registry"
