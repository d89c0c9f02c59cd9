import SupervisorCore

/// A child program `Kernel.startChild` started, until `Kernel.finish` or `Kernel.abandon`
/// ends it: its pid, its pidfd, the daemon's ends of its stdin and output pipes, and the
/// instant by which it must have exited.
public struct ChildProgram: Equatable, Sendable {
    /// The child's process id.
    public let pid: Int32
    /// A pidfd of the child, which the daemon owns.
    public let pidfd: Int32
    /// The write end of the child's stdin.
    public let input: Int32
    /// The read end of the child's stdout and stderr.
    public let output: Int32
    /// When the child is killed if it has not exited.
    public let deadline: Instant

    /// A child with these descriptors, which the caller hands over.
    public init(pid: Int32, pidfd: Int32, input: Int32, output: Int32, deadline: Instant) {
        self.pid = pid
        self.pidfd = pidfd
        self.input = input
        self.output = output
        self.deadline = deadline
    }
}
