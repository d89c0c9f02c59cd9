import SupervisorCore

#if canImport(Glibc)
import Glibc
#endif

/// The account database through NSS (getpwnam_r, getpwuid_r, getgrnam_r).
public enum SystemAccounts {
    /// Lookups by name and uid, answered by NSS at each call (the reentrant `_r` functions,
    /// so any thread may call them; each may block on a remote NSS source). Each answers nil
    /// when there is no such entry or the lookup fails.
    public static let directory = AccountDirectory(
        userNamed: { name in
            withPasswd { pw, buffer, result in getpwnam_r(name, &pw, buffer, 16384, &result) }.map { ($0.pw_uid, $0.pw_gid) }
        },
        primaryGroup: { uid in
            withPasswd { pw, buffer, result in getpwuid_r(uid, &pw, buffer, 16384, &result) }.map { $0.pw_gid }
        },
        groupNamed: { name in
            var gr = group()
            var result: UnsafeMutablePointer<group>?
            var buffer = [CChar](repeating: 0, count: 65536)
            let rc = getgrnam_r(name, &gr, &buffer, buffer.count, &result)
            return rc == 0 && result != nil ? gr.gr_gid : nil
        })

    private static func withPasswd(_ body: (inout passwd, UnsafeMutablePointer<CChar>, inout UnsafeMutablePointer<passwd>?) -> Int32) -> passwd? {
        var pw = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16384)
        let rc = buffer.withUnsafeMutableBufferPointer { body(&pw, $0.baseAddress!, &result) }
        return rc == 0 && result != nil ? pw : nil
    }
}
