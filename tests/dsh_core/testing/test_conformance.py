"""Every ChatModel passes the same battery: the scripted fake and the adapter over the stub."""

from __future__ import annotations

import asyncio

import pytest

from dsh_core.testing.conformance import CHECKS, Check, ModelFactory, scripted_model, stub_adapter

MODELS = {"scripted": scripted_model, "adapter": stub_adapter}


@pytest.mark.parametrize("factory", MODELS.values(), ids=MODELS.keys())
@pytest.mark.parametrize("check", CHECKS, ids=[check.__name__ for check in CHECKS])
def test_every_model_passes(check: Check, factory: ModelFactory) -> None:
    asyncio.run(check(factory))
