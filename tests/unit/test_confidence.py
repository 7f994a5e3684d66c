"""The confidence model: its features, the shipped parameters, fitting and calibration helpers."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pytest

from router.settings import RoutingSettings
from router.stages.confidence import (
    FEATURES,
    SHIPPED,
    ConfidenceModel,
    candidate_features,
    expected_calibration_error,
    fit_isotonic,
    fit_logistic,
)


@dataclass
class S:
    dense: float
    bm25: float
    match: float
    intent_bonus: float = 0.0


def feature(rows: np.ndarray, name: str) -> np.ndarray:
    return rows[:, FEATURES.index(name)]


def test_the_shipped_parameters_load_and_the_default_threshold_is_theirs() -> None:
    model = ConfidenceModel.shipped()
    assert model.coef.shape == (len(FEATURES),) and model.mean.shape == model.scale.shape == (len(FEATURES),)
    assert np.all(np.diff(model.iso_x) >= 0) and np.all(np.diff(model.iso_y) >= 0)
    # The setting's default is the threshold the benchmark chose with these parameters.
    assert RoutingSettings().min_confidence == pytest.approx(model.threshold)
    assert json.loads(SHIPPED.read_text())["features"] == list(FEATURES)


def test_parameters_for_other_features_are_refused() -> None:
    data = ConfidenceModel.shipped().to_json()
    data["features"] = ["dense"]
    with pytest.raises(ValueError, match="features"):
        ConfidenceModel.from_json(data)


def test_the_shipped_model_is_monotonic_in_the_best_candidates_scores() -> None:
    model = ConfidenceModel.shipped()
    servers = ["a", "b", "c"]
    sizes = {"a": 3, "b": 3, "c": 3}
    previous = -1.0
    for top in np.linspace(0.3, 1.0, 15):
        # The best candidate's retrieval score, cosine and BM25 all rise; the others stay as they are.
        scores = [S(dense=top * 0.6, bm25=top * 10, match=top), S(0.15, 1.0, 0.25), S(0.1, 0.5, 0.2)]
        p = float(model.predict(candidate_features(scores, servers, sizes))[0])
        assert p >= previous - 1e-12
        previous = p
    weak = model.predict(candidate_features([S(0.05, 0.0, 0.3), S(0.04, 0.0, 0.28)], ["a", "b"], sizes))[0]
    assert previous > weak  # strictly more sure of a strong match than of a weak one


def test_probabilities_stay_between_zero_and_one_whatever_the_features() -> None:
    model = ConfidenceModel.shipped()
    rng = np.random.default_rng(3)
    p = model.predict(rng.normal(0, 50, size=(500, len(FEATURES))))
    assert p.shape == (500,) and np.all((p >= 0) & (p <= 1))
    assert model.predict(np.zeros((0, len(FEATURES)))).shape == (0,)


def test_features_describe_each_candidate_among_the_others() -> None:
    scores = [S(0.6, 8.0, 0.9), S(0.4, 9.0, 0.7), S(0.2, 0.0, 0.3)]
    rows = candidate_features(scores, ["a", "a", "b"], {"a": 2, "b": 1})
    assert feature(rows, "lead") == pytest.approx([0.2, -0.2, -0.6])
    assert feature(rows, "dense_lead") == pytest.approx([0.2, -0.2, -0.4])
    assert list(feature(rows, "best_dense")) == [1, 0, 0]
    assert list(feature(rows, "best_bm25")) == [0, 1, 0]  # dense and BM25 disagree on the best
    assert list(feature(rows, "server_share")) == [1, 1, 0]  # a's other tool is there too
    assert list(feature(rows, "single_capability")) == [0, 0, 1]
    assert feature(rows, "server_lead") == pytest.approx([0.6, 0.6, -0.6])  # a's best is ahead of b's
    assert feature(rows, "bm25_scaled") == pytest.approx([8.0 / np.log1p(3), 9.0 / np.log1p(3), 0.0])


def test_the_server_share_is_a_share_for_a_candidate_below_the_top_too() -> None:
    # Six tools of one server, the five best fill the top: the sixth has all of the top beside it.
    scores = [S(0.5 - i / 20, 1.0, 0.9 - i / 10) for i in range(6)]
    rows = candidate_features(scores, ["a"] * 6, {"a": 9})
    assert list(feature(rows, "server_share")) == [1] * 6


def test_the_intent_bonus_does_not_move_the_features() -> None:
    plain = candidate_features([S(0.5, 2.0, 0.8), S(0.3, 1.0, 0.5)], ["a", "b"], {"a": 1, "b": 1})
    bonus = candidate_features([S(0.5, 2.0, 0.9, 0.1), S(0.3, 1.0, 0.5)], ["a", "b"], {"a": 1, "b": 1})
    assert np.allclose(plain, bonus)


def test_logistic_fit_learns_the_direction_of_the_evidence() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2000, 2))
    y = (rng.random(2000) < 1 / (1 + np.exp(-(3 * x[:, 0] - 1)))).astype(float)
    mean, scale, coef, intercept = fit_logistic(x, y, l2=0.1)
    raw = coef / scale  # back on the unstandardised features
    assert raw[0] == pytest.approx(3, abs=0.4) and abs(raw[1]) < 0.3
    assert intercept - float(raw @ mean) == pytest.approx(-1, abs=0.3)


def test_evidence_features_never_get_a_negative_weight() -> None:
    # The second feature copies the first and adds noise that counts against: unconstrained, it gets a
    # negative weight; as evidence it is left out, and the first keeps its positive weight.
    rng = np.random.default_rng(1)
    signal = rng.normal(size=3000)
    x = np.column_stack([signal, signal + rng.normal(scale=0.3, size=3000)])
    y = (rng.random(3000) < 1 / (1 + np.exp(-(4 * signal - 2 * x[:, 1])))).astype(float)
    free = fit_logistic(x, y, l2=0.1)[2]
    assert free[1] < 0
    constrained = fit_logistic(x, y, l2=0.1, nonnegative=np.array([True, True]))[2]
    assert constrained[1] == 0.0 and constrained[0] > 0


def test_isotonic_fit_is_non_decreasing_and_pools_violations() -> None:
    xs, ys = fit_isotonic(np.array([0.1, 0.2, 0.3, 0.4]), np.array([0.0, 1.0, 0.0, 1.0]))
    assert list(ys) == [0.0, 0.5, 1.0] and np.all(np.diff(xs) > 0)


def test_calibration_error_is_zero_when_confidence_matches_accuracy() -> None:
    p = np.array([0.25] * 4 + [0.75] * 4)
    y = np.array([1, 0, 0, 0, 1, 1, 1, 0], dtype=float)
    assert expected_calibration_error(p, y) == pytest.approx(0.0)
    assert expected_calibration_error(np.array([0.9, 0.9]), np.array([0.0, 0.0])) == pytest.approx(0.9)


def test_a_candidate_below_the_top_five_counts_its_servers_candidates_among_them() -> None:
    scores = [S(0.5, 1.0, 0.9 - i * 0.1) for i in range(7)]
    servers = ["a", "b", "c", "d", "e", "f", "a"]  # the last one's server holds the best
    rows = candidate_features(scores, servers, dict.fromkeys("abcdef", 3))
    assert feature(rows, "server_share")[6] == pytest.approx(1 / 2)  # 1 of the 2 its server could have
    assert feature(rows, "server_share")[0] == 0.0  # the other "a" is not among the top five
