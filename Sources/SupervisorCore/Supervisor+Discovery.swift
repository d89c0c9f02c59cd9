import ExtensionProtocol

/// Discovery by extension point and content (`ActivationRule`).
extension Supervisor {
    /// Discovery (`Message.discover`): the extensions of `point` (every point when empty) that
    /// `peer` may open under the same `hosts` rule as `begin`, and whose activation rule accepts
    /// `content` (with empty content, every one of the point), sorted by id. Extensions removed
    /// by a reload but still running are left out.
    public func discover(point: String, content: ActivationContent, peer: PeerIdentity) -> [Manifest] {
        records.values.lazy
            .filter { !$0.retired }
            .map(\.manifest)
            .filter { m in
                (point.isEmpty || m.point == point) && self.mayOpen(m, peer)
                    && (content.counts.isEmpty || m.activation?.accepts(content) == true)
            }
            .sorted { $0.id < $1.id }
    }
}
