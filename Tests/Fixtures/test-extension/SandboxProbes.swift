import CProbes
import ExtensionRuntime
import Foundation

/// The test extension's commands that look at its sandbox (SandboxTests):
///   getenv <NAME>        -> "env <value>" or "env unset"
///   home                 -> ExtensionContext.containerURL: "home <path>" or "no home"
///   list-dir <path>      -> "entries <name> <name> ..." (sorted) or "refused: <error>"
///   pids                 -> the numeric entries of its /proc: "pids <pid> <pid> ..."
///   syscall <name> [pid] -> mount, unshare-user, bpf, ptrace <pid>, io_uring, tcp <port>,
///                           msgget <key>, msgget-create <key> (System V message queues):
///                           "allowed" or "refused: <error>"
///   output <fd>          -> how fd is open, and whether it is a terminal:
///                           "output read-only|write-only|read-write tty|not-a-tty"
///   reopen <fd>          -> opens /proc/self/fd/<fd> for reading and writing:
///                           "allowed" or "refused: <error>"
///   say <text>           -> writes <text> and a newline to stderr: "said"
///   truncate <fd>        -> ftruncate(fd, 0): "allowed" or "refused: <error>"
///   shutdown <fd>        -> shutdown(fd, SHUT_WR): "allowed" or "refused: <error>"
///   reach <pid>          -> kill(pid, 0) and pidfd_open(pid): "reach kill <outcome> pidfd <outcome>"
///   reach-scan <last>    -> of the pids 1...last, how many pidfd_open opens, and how many
///                           kill(pid, 0) finds that its /proc has not: "reached <n> unexplained <n>"
///   abstract <name>      -> connect to the abstract unix socket <name>: "allowed" or "refused: <error>"
///   abstract-listen <name> -> listen on the abstract unix socket <name>: "allowed" or "refused: <error>"
///   tcp-to <addr:port>   -> connect to an IPv4 address: "allowed" or "refused: <error>"
func sandboxProbe(_ words: [String]) -> String? {
    func word(_ i: Int) -> String { words.count > i ? words[i] : "" }
    func outcome(_ code: Int32) -> String { code == 0 ? "allowed" : "refused: \(String(cString: strerror(code)))" }
    switch words.first {
    case "getenv":
        return getenv(word(1)).map { "env \(String(cString: $0))" } ?? "env unset"
    case "home":
        return ExtensionContext.containerURL.map { "home \($0.path)" } ?? "no home"
    case "list-dir":
        guard let dir = opendir(word(1)) else { return "refused: \(String(cString: strerror(errno)))" }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
            if name != "." && name != ".." { names.append(name) }
        }
        return (["entries"] + names.sorted()).joined(separator: " ")
    case "pids":
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return (["pids"] + names.compactMap { Int32($0) }.sorted().map(String.init)).joined(separator: " ")
    case "syscall":
        switch word(1) {
        case "mount": return outcome(probe_mount())
        case "unshare-user": return outcome(probe_unshare_user())
        case "bpf": return outcome(probe_bpf())
        case "ptrace": return outcome(probe_ptrace(pid_t(word(2)) ?? 1))
        case "io_uring": return outcome(probe_io_uring())
        case "tcp": return outcome(probe_tcp_connect(Int32(word(2)) ?? 0))
        case "socket":  // socket FAMILY[:PROTOCOL] (the command has three words at most)
            let numbers = word(2).split(separator: ":").map { Int32($0) ?? -1 }
            return outcome(probe_socket(numbers.first ?? -1, numbers.count > 1 ? numbers[1] : 0))
        case "socket-wide":  // socket-wide FAMILY[:PROTOCOL]: the registers' upper halves set
            let numbers = word(2).split(separator: ":").map { Int32($0) ?? -1 }
            return outcome(probe_socket_wide(numbers.first ?? -1, numbers.count > 1 ? numbers[1] : 0))
        case "msgget": return outcome(probe_message_queue(Int32(word(2)) ?? 0, 0))
        case "msgget-create": return outcome(probe_message_queue(Int32(word(2)) ?? 0, 1))
        case "project": return outcome(probe_project_attribute(word(2)))
        case "inode-flags": return outcome(probe_inode_flags(word(2)))
        case "file-setattr": return outcome(probe_file_setattr(word(2)))
        default: return "unknown system call"
        }
    case "output":
        let fd = Int32(word(1)) ?? -1
        let flags = fcntl(fd, F_GETFL)
        guard flags >= 0 else { return "refused: \(String(cString: strerror(errno)))" }
        let access = ["read-only", "write-only", "read-write"][Int(flags & O_ACCMODE)]
        return "output \(access) \(isatty(fd) == 1 ? "tty" : "not-a-tty")"
    case "reopen":
        let fd = open("/proc/self/fd/\(word(1))", O_RDWR | O_NOCTTY)
        if fd < 0 { return "refused: \(String(cString: strerror(errno)))" }
        close(fd)
        return "allowed"
    case "output-kind":
        var st = stat()
        guard fstat(Int32(word(1)) ?? -1, &st) == 0 else { return "refused: \(String(cString: strerror(errno)))" }
        switch st.st_mode & S_IFMT {
        case S_IFIFO: return "fifo"
        case S_IFREG: return "file"
        case S_IFSOCK: return "socket"
        case S_IFCHR: return "character device"
        default: return "other"
        }
    case "fs-size":
        var st = statvfs()
        guard statvfs(word(1), &st) == 0 else { return "refused: \(String(cString: strerror(errno)))" }
        return "size \(UInt64(st.f_blocks) * UInt64(st.f_frsize))"
    case "truncate":
        return ftruncate(Int32(word(1)) ?? -1, 0) == 0 ? "allowed" : "refused: \(String(cString: strerror(errno)))"
    case "shutdown":  // shutdown(fd, SHUT_WR): what closed journald's stream for every process once
        return shutdown(Int32(word(1)) ?? -1, Int32(SHUT_WR)) == 0 ? "allowed" : "refused: \(String(cString: strerror(errno)))"
    case "say-many":
        let count = Int(word(1)) ?? 1
        for i in 0..<count { FileHandle.standardOutput.write(Data("line \(i)\n".utf8)) }
        return "said"
    case "reach":
        let pid = Int32(word(1)) ?? 0
        return "reach kill \(outcome(probe_kill(pid))) pidfd \(outcome(probe_pidfd(pid)))"
    case "reach-scan":
        var unexplained: Int32 = 0
        let opened = probe_reach_count(Int32(word(1)) ?? 0, &unexplained)
        return "reached \(opened) unexplained \(unexplained)"
    case "abstract":
        return outcome(probe_abstract_connect(word(1)))
    case "abstract-listen":
        return outcome(probe_abstract_listen(word(1)))
    case "tcp-to":
        let parts = word(1).split(separator: ":")
        guard parts.count == 2, let port = Int32(parts[1]) else { return "bad address \(word(1))" }
        return outcome(probe_tcp_connect_to(String(parts[0]), port))
    case "say":
        FileHandle.standardError.write(Data((words.dropFirst().joined(separator: " ") + "\n").utf8))
        return "said"
    default:
        return nil
    }
}
