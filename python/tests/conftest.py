"""Shared circuits: Stim's rotated surface-code memory experiments under circuit noise."""

import stim


def surface_circuit(distance: int, p: float, basis: str = "z") -> stim.Circuit:
    return stim.Circuit.generated(
        f"surface_code:rotated_memory_{basis}",
        distance=distance,
        rounds=distance,
        after_clifford_depolarization=p,
        before_round_data_depolarization=p,
        before_measure_flip_probability=p,
        after_reset_flip_probability=p,
    )


def repetition_circuit(distance: int, p: float) -> stim.Circuit:
    return stim.Circuit.generated(
        "repetition_code:memory",
        distance=distance,
        rounds=distance,
        after_clifford_depolarization=p,
        before_measure_flip_probability=p,
        after_reset_flip_probability=p,
    )


def sample(circuit: stim.Circuit, shots: int, seed: int, bit_packed: bool = False):
    sampler = circuit.compile_detector_sampler(seed=seed)
    return sampler.sample(shots, separate_observables=True, bit_packed=bit_packed)
