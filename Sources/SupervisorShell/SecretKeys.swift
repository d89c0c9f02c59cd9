import ExtensionProtocol
import Logging
import SupervisorKernel

/// Where the secret store's key comes from (docs/secrets.md, "The key"), in this order:
/// 1. the service's credential `extensiond-secrets-key` (`$CREDENTIALS_DIRECTORY`, given by a
///    `LoadCredentialEncrypted=` drop-in: sealed with TPM2 by systemd, decrypted by it into
///    unswappable memory for the service alone);
/// 2. `STATE/secrets/key.cred`, sealed with `systemd-creds` (TPM2 where the daemon sees one, the
///    host key otherwise), decrypted with it at the first use;
/// 3. `STATE/secrets/key`, a file only the daemon's uid reads (no `systemd-creds` usable: the
///    user daemon, or a machine without systemd), with a warning;
/// 4. none yet: a new random key, sealed with `systemd-creds` when the daemon is root and it
///    works, else written as in 3.
/// The key travels as 64 hexadecimal digits (`systemd-creds` hands back text).
enum SecretKeys {
    static let credentialName = "extensiond-secrets-key"
    static let systemdCreds = "/usr/bin/systemd-creds"

    /// The cipher, and where its key came from; or why there is none.
    /// A new key is made only where there is no key file at all (both absent, not unreadable)
    /// and no item was sealed before (`itemsExist` false): never over items of another key.
    static func load(directory: String, kernel: any Kernel, logger: Logger, itemsExist: Bool) -> Result<(SecretCipher, String), StoreProblem> {
        if let credentials = kernel.environment("CREDENTIALS_DIRECTORY"), case .success(var bytes) = kernel.read(credentials + "/" + credentialName) {
            defer { for i in bytes.indices { bytes[i] = 0 } }
            return cipher(bytes, "the service's credential \(credentialName)")
        }
        let sealed = directory + "/key.cred", plain = directory + "/key"
        let sealedStatus = kernel.status(sealed, followLinks: false)
        if case .success = sealedStatus {
            switch run(
                [
                    "decrypt", "--name=\(credentialName)", sealed, "-",
                ], input: [], kernel: kernel)
            {
            case .success(let output): return cipher(Array(output.utf8), "systemd-creds (\(sealed))")
            case .failure(let why): return .failure(StoreProblem("cannot decrypt \(sealed) with systemd-creds: \(why)"))
            }
        }
        switch kernel.read(plain) {
        case .success(var bytes):
            defer { for i in bytes.indices { bytes[i] = 0 } }
            return cipher(bytes, "\(plain) (readable by the daemon's uid only: no systemd-creds)")
        case .failure(let e) where !e.isNoEntry: return .failure(StoreProblem("cannot read \(plain): \(e)"))
        case .failure: break
        }
        if case .failure(let e) = sealedStatus, !e.isNoEntry { return .failure(StoreProblem("cannot look at \(sealed): \(e)")) }
        if itemsExist { return .failure(StoreProblem("items exist but no key file does (\(sealed), \(plain)): no new key is made over them")) }
        // A new key.
        var hex = Array(SecretCipher.randomBytes(SecretCipher.keyBytes).flatMap { b in [b >> 4, b & 15].map { UInt8(ascii: "0") + ($0 < 10 ? $0 : $0 + 39) } })
        defer { for i in hex.indices { hex[i] = 0 } }
        if kernel.userID == 0, case .success = kernel.status(systemdCreds, followLinks: true) {
            switch run(["encrypt", "--name=\(credentialName)", "-", sealed], input: [hex], kernel: kernel) {
            case .success: return cipher(hex, "systemd-creds (\(sealed), new)")
            case .failure(let why):
                logger.warning("cannot seal the secret store's key with systemd-creds (\(why)); it is kept in \(plain), readable by root only")
            }
        }
        if let e = kernel.replaceFile(plain, withParts: [hex], mode: 0o600, durable: true) { return .failure(StoreProblem("cannot write \(plain): \(e)")) }
        logger.warning("the secret store's key is in \(plain), readable by the daemon's uid only (no systemd-creds): see docs/secrets.md")
        return cipher(hex, "\(plain) (new)")
    }

    private static func cipher(_ text: [UInt8], _ source: String) -> Result<(SecretCipher, String), StoreProblem> {
        var key = [UInt8]()
        var nibble: UInt8?
        for c in text {
            let v: UInt8
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): v = c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): v = c - UInt8(ascii: "a") + 10
            default: continue
            }
            if let high = nibble {
                key.append(high << 4 | v)
                nibble = nil
            } else {
                nibble = v
            }
        }
        defer { for i in key.indices { key[i] = 0 } }
        guard key.count == SecretCipher.keyBytes, let cipher = key.withUnsafeBytes({ SecretCipher(key: $0) }) else {
            return .failure(StoreProblem("the key from \(source) is not \(SecretCipher.keyBytes * 2) hexadecimal digits"))
        }
        return .success((cipher, source))
    }

    private static func run(_ arguments: [String], input: [[UInt8]], kernel: any Kernel) -> Result<String, StoreProblem> {
        switch kernel.startChild(systemdCreds, arguments: arguments, seconds: 20) {
        case .failure(let e): return .failure(StoreProblem("\(e)"))
        case .success(let child):
            switch kernel.finish(child, input: input, whileItRuns: {}) {
            case .failure(let e): return .failure(StoreProblem("\(e)"))
            case .success(let (status, output)):
                guard status == .exited(0) else { return .failure(StoreProblem("\(String(describing: status)): \(output.split(separator: "\n").last ?? "")")) }
                return .success(output)
            }
        }
    }
}

/// Why the secret store, or its key, cannot be used.
struct StoreProblem: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
