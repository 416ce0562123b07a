import Networking

/// Between a transport address and the address a STUN attribute carries.
extension TransportAddress {
    init(_ stun: STUNAddress) { self.init(addressBytes: stun.address, port: stun.port) }

    var stunAddress: STUNAddress? { addressBytes.map { STUNAddress(address: $0, port: port) } }
}
