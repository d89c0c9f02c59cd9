import CBus

/// What makes a discretionary background transfer wait (docs/transfers.md, "Discretionary
/// tasks"): a metered network (NetworkManager's `Metered`) or a machine on battery (UPower's
/// `OnBattery`), as the system bus says. A service that is not there constrains nothing.
public struct Constraints: Sendable, Equatable {
    /// The network is metered (nil: no NetworkManager).
    public var metered: Bool?
    /// The machine runs on battery (nil: no UPower).
    public var onBattery: Bool?

    /// Whether discretionary tasks wait.
    public var constrained: Bool { metered == true || onBattery == true }

    /// Asks the system bus, on the calling thread (each call bounded by 5 s).
    static func check() -> Constraints {
        var metered: Int32 = -1, onBattery: Int32 = -1
        var why = [CChar](repeating: 0, count: 256)
        _ = bus_power_and_network(5_000_000, &metered, &onBattery, &why, why.count)
        return Constraints(metered: metered < 0 ? nil : metered == 1, onBattery: onBattery < 0 ? nil : onBattery == 1)
    }
}
