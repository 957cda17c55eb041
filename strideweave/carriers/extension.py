"""Carrier definitions: storage providers and exact transfer routes.

Everything here is the object ``strideweave._core`` defines (and the top-level
package re-exports): ``strideweave.carriers.extension.TransferRoute is
strideweave.TransferRoute``.

A Python subclass of ``Carrier`` becomes definition-backed with
``register_carrier_definition(cls, CarrierDefinition(storage, transfers))``:
instances are built as ``cls(slots, *, dtype, mutable=True)`` and store their
slots through the ``StorageProvider``; ``move``/``move_async`` perform an exact
``(type(source carrier), type(destination))`` pair through the source class's
own ``TransferRoute``. Decisions the contract leaves open:

- A subclass without its own definition inherits its nearest defined base's
  storage (so it can be built and read), never its routes, and counts as
  definition-backed (the legacy registry refuses it; its fallback permission
  is the inherited ``elementwise_fallback``).
- Mixed pairs: a definition-free class (every built-in, plain Python
  carriers) keeps its legacy contract, under which an unregistered pair falls
  back, so the elementwise fallback serves a pair without a route when every
  definition-backed side permits it.
- Observing a class (an instance built, a route resolved, a legacy registry
  call naming it) also observes its Python bases.
- ``submit()`` raising is recorded on the handle (the provider has started
  submitting); ``prepare()`` raising is raised from ``move_async``.
- ``release`` runs exactly once, from ``release()`` or a successful move; a
  carrier garbage-collected unreleased is not released through the provider.
"""
from .. import _core

CarrierDefinition = _core.CarrierDefinition
StorageProvider = _core.StorageProvider
TransferProvider = _core.TransferProvider
TransferRoute = _core.TransferRoute
TransferRequest = _core.TransferRequest
PreparedTransfer = _core.PreparedTransfer
Unsupported = _core.Unsupported
ProviderCompletion = _core.ProviderCompletion
register_carrier_definition = _core.register_carrier_definition

__all__ = [
    "CarrierDefinition",
    "StorageProvider",
    "TransferProvider",
    "TransferRoute",
    "TransferRequest",
    "PreparedTransfer",
    "Unsupported",
    "ProviderCompletion",
    "register_carrier_definition",
]
