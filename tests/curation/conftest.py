import pytest

from tests.support.factories import make_trajectory, verdict


@pytest.fixture
def trajectory(db):
    return make_trajectory(judge=verdict(passed=False, score=0.3, confidence=0.9))
