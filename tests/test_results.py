"""The common call's results are built without awkward's constructors
(``gpuexec.kernels.api._results``): they must be the objects the constructors make."""

from __future__ import annotations

import pickle

import awkward as ak
import numpy as np
import pytest

import gpuexec.kernels as gk
from gpuexec.kernels.api import _results

C = ak.contents


def constructed(fast):
    """The same result made through awkward's constructors, from ``fast``'s pieces (read
    from its slots: the ``attrs`` property would fill ``_attrs`` in)."""
    fields = vars(fast)
    return ak.Array(fields["_layout"], behavior=fields["_behavior"], attrs=fields["_attrs"])


def jagged(seed=0, n=50):
    rng = np.random.default_rng(seed)
    counts = rng.poisson(4, n)
    return ak.unflatten(rng.normal(size=int(counts.sum())), counts)


def test_the_fast_path_is_on_for_this_awkward():
    # the call floor's claim rests on it; a new awkward that changes its objects turns it
    # off (results stay right) and this test says so
    assert _results.FAST, f"awkward {ak.__version__}: results made by the constructors"


@pytest.mark.parametrize("fname,kwargs", [
    ("sum", {}), ("max", {}), ("max", {"mask_identity": False}), ("argmin", {}),
    ("count", {}), ("count_nonzero", {"keepdims": True}), ("min", {"keepdims": True}),
    ("prod", {"mask_identity": True, "keepdims": True})])
def test_results_are_what_the_constructors_make(fname, kwargs):
    x = jagged()
    got = getattr(gk, fname)(x, axis=1, **kwargs)
    want = constructed(got)
    assert type(got) is type(want) is ak.Array
    assert vars(got).keys() == vars(want).keys()
    assert all(vars(got)[k] is vars(want)[k] for k in vars(want))
    node = got.layout
    while not isinstance(node, C.NumpyArray):
        node = node.content
    fresh = C.NumpyArray(node.data, backend=node.backend)
    assert vars(node).keys() == vars(fresh).keys()
    assert node.data is fresh.data and node.backend is fresh.backend
    assert node.parameters == {} and node.is_equal_to(fresh)
    assert str(got.type) == str(getattr(ak, fname)(x, axis=1, **kwargs).type)
    assert got.to_list() == want.to_list()
    assert pickle.loads(pickle.dumps(got)).to_list() == want.to_list()


@pytest.mark.parametrize("fname,kwargs", [
    ("max", {}), ("argmin", {}), ("min", {"keepdims": True}),
    ("sum", {"mask_identity": True}), ("count_nonzero", {"mask_identity": True})])
def test_option_masks_are_what_the_constructors_make(fname, kwargs):
    x = jagged(6)
    x = ak.concatenate([x, ak.Array([[]] * 3)])  # empty lists: some entries masked
    result = getattr(gk, fname)(x, axis=1, **kwargs)
    assert result.to_list() == getattr(ak, fname)(x, axis=1, **kwargs).to_list()
    got = result.layout
    if isinstance(got, C.RegularArray):
        got = got.content
    assert type(got) is C.ByteMaskedArray
    fresh = C.ByteMaskedArray(ak.index.Index8(got.mask.data), got.content, valid_when=False)
    assert vars(got).keys() == vars(fresh).keys()
    assert vars(got.mask).keys() == vars(fresh.mask).keys()
    assert got.mask.nplike is fresh.mask.nplike and got.mask.data.dtype == np.int8
    assert got.backend is fresh.backend and got.parameters == {}
    assert got.is_equal_to(fresh) and fresh.mask.data.sum() >= 3


def test_behavior_and_attrs_pass_through():
    class Scaled(ak.Array):
        pass

    behavior = {("*", "scaled"): Scaled}
    x = ak.Array(jagged(1), behavior=behavior)
    got = gk.sum(x, axis=1)
    assert got.behavior is behavior and type(got) is ak.Array  # no name: a plain Array
    assert gk.sum(x, axis=1, behavior={"k": 1}).behavior == {"k": 1}
    with_attrs = ak.Array(jagged(2), attrs={"unit": "GeV"})
    assert gk.max(with_attrs, axis=1).attrs == {"unit": "GeV"}  # through the constructor


def test_a_behavior_that_is_not_a_mapping_is_refused_like_awkward():
    x = jagged(3)
    with pytest.raises(TypeError, match="behavior must be None or a mapping"):
        ak.Array(x.layout, behavior=[1])
    with pytest.raises(TypeError, match="behavior must be None or a mapping"):
        gk.sum(x, axis=1, behavior=[1])


def test_results_can_be_changed_like_any_array():
    got = gk.sum(jagged(4), axis=1)
    got.layout = ak.to_layout(np.array([1.0, 2.0]))  # awkward's setter: new layout and class
    assert got.to_list() == [1.0, 2.0] and type(got) is ak.Array
    with pytest.raises(AttributeError, match="only private attributes"):
        got.not_a_field = 1
    zipped = ak.zip({"s": gk.sum(jagged(5), axis=1)})
    assert zipped.fields == ["s"] and len(zipped) == 50
