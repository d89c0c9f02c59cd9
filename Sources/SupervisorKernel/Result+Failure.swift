extension Result {
    /// The error of a failure, nil for a success.
    public var failure: Failure? {
        if case .failure(let e) = self { return e }
        return nil
    }

    /// Whether this is a success.
    public var isSuccess: Bool {
        if case .success = self { return true }
        return false
    }
}
