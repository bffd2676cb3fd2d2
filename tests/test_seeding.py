import numpy as np
import torch

from genenv.models.policy import sample_by_inverse_cdf
from genenv.seeding import _splitmix64, sequence_key, sequence_uniforms


def test_splitmix64_matches_the_published_sequence():
    # SplitMix64 seeded with 0 outputs 0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, ... (state advances by the golden
    # gamma before each output)
    gamma = 0x9E3779B97F4A7C15
    first = _splitmix64(np.array([0], dtype=np.uint64))
    second = _splitmix64(np.array([gamma], dtype=np.uint64))
    assert int(first[0]) == 0xE220A8397B1DCDAF and int(second[0]) == 0x6E789E6AA1B965F4


def test_a_sequence_uniforms_depend_on_its_own_key_only():
    keys = [sequence_key(task, sample, 0) for task in range(5) for sample in range(3)]
    whole = sequence_uniforms(11, keys, 7)
    assert whole.shape == (15, 7) and whole.dtype == np.float64
    assert ((whole >= 0) & (whole < 1)).all()
    reordered = sequence_uniforms(11, keys[::-1][:4], 7)
    assert np.array_equal(reordered, whole[::-1][:4])          # bit for bit: integer hashing
    assert not np.array_equal(sequence_uniforms(12, keys, 7), whole)   # the phase seed matters
    assert len({sequence_key(t, s, k) for t in range(20) for s in range(8) for k in range(5)}) == 800


def test_uniforms_look_uniform_and_independent():
    u = sequence_uniforms(0, [sequence_key(i) for i in range(4000)], 16)
    assert abs(u.mean() - 0.5) < 0.005 and abs(u.var() - 1 / 12) < 0.002
    assert abs(np.corrcoef(u[:, :-1].ravel(), u[:, 1:].ravel())[0, 1]) < 0.01     # step to step
    assert abs(np.corrcoef(u[:-1].ravel(), u[1:].ravel())[0, 1]) < 0.01            # key to key


def test_inverse_cdf_sampling_draws_from_the_softmax():
    probs = torch.tensor([0.5, 0.3, 0.15, 0.05, 0.0])
    rows = 20000
    logprobs = probs.log().expand(rows, -1).contiguous()
    uniforms = torch.from_numpy(sequence_uniforms(3, list(range(rows)), 1)[:, 0])
    tokens = sample_by_inverse_cdf(logprobs, uniforms)
    freq = torch.bincount(tokens, minlength=5).double() / rows
    assert freq[4] == 0                                        # a zero-probability token is never drawn
    assert torch.allclose(freq, probs.double(), atol=0.012)    # ~4 standard errors at 20,000 draws
    # hand-picked uniforms land where the cumulative distribution says: [0, .5) -> 0, [.5, .8) -> 1, ...
    edges = torch.tensor([0.0, 0.499, 0.501, 0.799, 0.801, 0.949, 0.951, 0.999999], dtype=torch.float64)
    picked = sample_by_inverse_cdf(probs.log().expand(len(edges), -1).contiguous(), edges, rows_per_block=3)
    assert picked.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]


def test_vectorised_keys_equal_scalar_keys_and_lists_equal_arrays():
    from genenv.seeding import sequence_keys
    tasks, samples = np.repeat(np.arange(6), 3), np.tile(np.arange(3), 6)
    keys = sequence_keys(tasks, samples, 2)
    assert keys.dtype == np.uint64
    assert [int(k) for k in keys] == [sequence_key(int(t), int(s), 2) for t, s in zip(tasks, samples)]
    assert np.array_equal(sequence_uniforms(5, keys, 4), sequence_uniforms(5, [int(k) for k in keys], 4))
