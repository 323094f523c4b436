"""The share-partition leader (KIP-932, KIP-1289): record states, the sans-IO partition core,
share sessions and the asyncio actors that serve ShareFetch and ShareAcknowledge."""
