"""The kernel corpus on the interpreter, checked against numpy on random inputs."""
import numpy as np
import pytest

from . import cases


def _check(module, case, seed=0, **launch_opts):
    def launch(name, grid, block, args, shared_bytes=0):
        module.launch(name, grid, block, args, shared_bytes, **launch_opts)
    for name, got, expected, rtol, atol in case(launch, np.random.default_rng(seed)):
        g = got.float().numpy() if got.dtype.is_floating_point else got.numpy()
        np.testing.assert_allclose(g.reshape(-1).astype(np.float64), np.asarray(expected).reshape(-1).astype(np.float64),
                                   rtol=rtol, atol=atol, err_msg=f"{case.__name__}: {name}")


@pytest.mark.parametrize("case", cases.ELEMENTWISE, ids=lambda c: c.__name__)
def test_elementwise(elementwise, case):
    _check(elementwise, case)


@pytest.mark.parametrize("case", cases.COOPERATIVE, ids=lambda c: c.__name__)
def test_cooperative(cooperative, case):
    _check(cooperative, case)


@pytest.mark.parametrize("case", cases.COOPERATIVE, ids=lambda c: c.__name__)
def test_one_cta_per_group(cooperative, case):
    """Each CTA in its own lane group (groups take turns in slices): same results, and cross-CTA
    spins still complete."""
    _check(cooperative, case, lanes_per_group=32)
