import CSodium
import ExtensionProtocol
import ExtensionTransport

/// The secret store's cipher (docs/secrets.md): XChaCha20-Poly1305 (libsodium's IETF AEAD), a
/// random 24-byte nonce per sealing, the item's description as the additional data, so a
/// record moved to another group or changed in any attribute fails to open. The 32-byte key
/// lives in libsodium's guarded memory (locked in RAM, excluded from core dumps, guard pages
/// around it), read-only but while it is used. Owned by the daemon's loop thread.
public final class SecretCipher {
    private let key: UnsafeMutableRawPointer
    /// The key's length in bytes.
    public static let keyBytes = Int(crypto_aead_xchacha20poly1305_ietf_KEYBYTES)
    static let nonceBytes = Int(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES)
    static let tagBytes = Int(crypto_aead_xchacha20poly1305_ietf_ABYTES)

    /// A cipher with the key in `keyBytes` (`keyBytes` long), which it copies; nil when
    /// libsodium cannot start or the key memory cannot be had.
    public init?(key bytes: UnsafeRawBufferPointer) {
        guard sodium_init() >= 0, bytes.count == Self.keyBytes, let memory = sodium_malloc(Self.keyBytes) else { return nil }
        memory.copyMemory(from: bytes.baseAddress!, byteCount: Self.keyBytes)
        sodium_mprotect_readonly(memory)
        key = memory
    }

    deinit { sodium_free(key) }

    /// `count` random bytes (a new key, an item's id).
    public static func randomBytes(_ count: Int) -> [UInt8] {
        _ = sodium_init()
        var out = [UInt8](repeating: 0, count: count)
        out.withUnsafeMutableBytes { randombytes_buf($0.baseAddress!, $0.count) }
        return out
    }

    /// `data` sealed with `additional`: the nonce, then the ciphertext and its tag.
    public func seal(_ data: SecretData, additional: [UInt8]) -> [UInt8] {
        var out = Self.randomBytes(Self.nonceBytes) + [UInt8](repeating: 0, count: data.count + Self.tagBytes)
        out.withUnsafeMutableBytes { o in
            let nonce = o.baseAddress!, cipher = o.baseAddress! + Self.nonceBytes
            data.withUnsafeBytes { m in
                additional.withUnsafeBytes { ad in
                    _ = crypto_aead_xchacha20poly1305_ietf_encrypt(
                        cipher, nil, m.baseAddress, UInt64(m.count), ad.baseAddress, UInt64(ad.count), nil, nonce, key)
                }
            }
        }
        return out
    }

    /// The data `sealed` holds, or nil when it does not open with `additional` (damaged, or
    /// sealed with another key or description).
    public func open(_ sealed: [UInt8], additional: [UInt8]) -> SecretData? {
        guard sealed.count >= Self.nonceBytes + Self.tagBytes else { return nil }
        var plain = [UInt8](repeating: 0, count: sealed.count - Self.nonceBytes - Self.tagBytes)
        let rc = plain.withUnsafeMutableBytes { p in
            sealed.withUnsafeBytes { s in
                additional.withUnsafeBytes { ad in
                    crypto_aead_xchacha20poly1305_ietf_decrypt(
                        p.baseAddress, nil, nil, s.baseAddress! + Self.nonceBytes, UInt64(s.count - Self.nonceBytes), ad.baseAddress, UInt64(ad.count),
                        s.baseAddress!.assumingMemoryBound(to: UInt8.self), key)
                }
            }
        }
        let data = SecretData(plain)
        return rc == 0 ? data : nil
    }
}
