"""Shared-prefix packing: a group's common prompt is encoded once, its responses against it (issue 40).

GRPO's G responses to one task share the task's prompt, which for real benchmarks (API descriptions, a dialogue,
function documentation) is most of every sequence. The unshared batch (:meth:`Policy.build_batch`) runs the
prompt G times, in the policy's forward, the reference's and the backward. Packed (Prefix Grouper, arXiv
2506.05433), one row holds the shared prefix once and then each member's own tokens (the rest of its prompt, for
multi-turn episodes the turns that differ, and its response), with

* an attention mask that lets a member's token see the prefix and the earlier tokens of its own member only, and
* position ids that continue each member's sequence from the prefix,

so every response token's log-prob is computed from exactly the context it has in the unshared batch: the same
numbers up to floating-point summation order, and the same gradients (the prefix's activations get the sum of
the members' gradients, as the G copies did). The shared prefix is the longest common prefix of the group's
prompts (token ids): a single-turn group shares its whole prompt, a multi-turn episode's later turns share the
task's first prompt and whatever of the dialogue they have in common.

Pure numpy here; :meth:`genenv.models.policy.Policy.packed_token_logprobs` runs the model on it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PAD_OWNER = -2      # a padding column: attends to itself only, read by nothing
PREFIX_OWNER = -1   # a shared-prefix column: attends causally within the prefix


@dataclass
class PackedBatch:
    """Groups packed one per row, with what it takes to read each sample's response log-probs back.

    ``allowed`` [rows, L, L] is True where a query column may attend to a key column; ``keep`` [rows, L] marks
    the columns whose logits are read (each once, though several members may read the prefix's last column);
    ``logit_index`` [N, R] is, for sample n's response token t, the index of its logit among the kept columns
    in row-major order (0 where t is past the response: masked by ``response_mask``)."""
    input_ids: np.ndarray       # [rows, L] int64
    position_ids: np.ndarray    # [rows, L] int64
    allowed: np.ndarray         # [rows, L, L] bool
    keep: np.ndarray            # [rows, L] bool
    logit_index: np.ndarray     # [N, R] int64
    response_ids: np.ndarray    # [N, R] int64, padded with 0
    response_mask: np.ndarray   # [N, R] float32

    @property
    def columns(self) -> int:
        """Token columns the forward pass runs over (rows x width): what packing saves against the unshared
        batch's samples x (prompt width + response width)."""
        return int(self.input_ids.size)


def common_prefix_length(sequences: list[list[int]]) -> int:
    """The length of the longest prefix every sequence starts with."""
    if not sequences:
        return 0
    first, length = sequences[0], min(map(len, sequences))
    for other in sequences[1:]:
        same = 0
        while same < length and other[same] == first[same]:
            same += 1
        length = same
    return length


def pack_groups(groups: list[list[tuple[list[int], list[int]]]], pad_id: int) -> PackedBatch:
    """Pack ``groups`` (each a list of (prompt_ids, response_ids) samples, prompts non-empty) one group per row.

    Samples come back in the order given (group by group) in ``logit_index``, ``response_ids`` and
    ``response_mask``. A member's last response token is not fed (nothing reads the logit after it)."""
    if not groups or any(not group for group in groups):
        raise ValueError("pack_groups: every group needs at least one sample")
    rows = []   # per group: (tokens, positions, owners, read-columns per sample)
    for group in groups:
        prompts = [list(prompt) for prompt, _ in group]
        if any(not prompt for prompt in prompts):
            raise ValueError("pack_groups: a sample's prompt is empty (its first response token has no context)")
        shared = common_prefix_length(prompts)
        tokens, positions, owners = list(prompts[0][:shared]), list(range(shared)), [PREFIX_OWNER] * shared
        reads = []
        for member, (prompt, response) in enumerate(group):
            start = len(tokens)
            own = list(prompt[shared:]) + list(response[:max(0, len(response) - 1)])
            tokens += own
            positions += range(shared, shared + len(own))
            owners += [member] * len(own)
            # response token t is predicted at virtual position len(prompt) + t - 1: in the prefix or in the member
            virtual = np.arange(len(response)) + len(prompt) - 1
            reads.append(np.where(virtual < shared, virtual, start + virtual - shared))
        rows.append((tokens, positions, owners, reads))

    width = max(len(tokens) for tokens, _, _, _ in rows)
    count = len(rows)
    input_ids = np.full((count, width), pad_id, dtype=np.int64)
    position_ids = np.zeros((count, width), dtype=np.int64)
    owner = np.full((count, width), PAD_OWNER, dtype=np.int64)
    keep = np.zeros((count, width), dtype=bool)
    for row, (tokens, positions, owners, reads) in enumerate(rows):
        input_ids[row, :len(tokens)] = tokens
        position_ids[row, :len(tokens)] = positions
        owner[row, :len(tokens)] = owners
        for columns in reads:
            keep[row, columns] = True
    query, key = owner[:, :, None], owner[:, None, :]
    causal = np.tril(np.ones((width, width), dtype=bool))[None]
    allowed = causal & (key != PAD_OWNER) & (query != PAD_OWNER) & ((key == PREFIX_OWNER) | (key == query))
    allowed |= np.eye(width, dtype=bool)[None] & (query == PAD_OWNER)   # no query row without a key

    # kept logits are read back in row-major order: the flat index of (row, column) is a running count of keep
    flat = np.cumsum(keep.ravel()).reshape(keep.shape) - 1
    samples = [(row, columns, response) for row, (group, (_, _, _, reads)) in enumerate(zip(groups, rows))
               for (_, response), columns in zip(group, reads)]
    resp_width = max(1, max(len(response) for _, _, response in samples))
    logit_index = np.zeros((len(samples), resp_width), dtype=np.int64)
    response_ids = np.zeros((len(samples), resp_width), dtype=np.int64)
    response_mask = np.zeros((len(samples), resp_width), dtype=np.float32)
    for n, (row, columns, response) in enumerate(samples):
        logit_index[n, :len(columns)] = flat[row, columns]
        response_ids[n, :len(response)] = response
        response_mask[n, :len(response)] = 1.0
    return PackedBatch(input_ids, position_ids, allowed, keep, logit_index, response_ids, response_mask)
