import ExtensionProtocol
import ExtensionRuntime

/// The test extension's commands for secrets (SecretTests), on generic passwords:
///   secret-add <service> <account> <data> [group] -> Keychain.add: "added", "duplicate", or "refused: <error>"
///   secret-copy <service> <account>        -> Keychain.copyMatching: "found <data> in <group>", "not found", or "refused: <error>"
///   secret-update <service> <account> <data> -> Keychain.update: "updated", "not found", or "refused: <error>"
///   secret-delete <service> <account>      -> Keychain.delete: "deleted", "not found", or "refused: <error>"
func secretProbe(_ line: String) -> String? {
    let words = line.split(separator: " ").map(String.init)
    func word(_ i: Int) -> String { words.count > i ? words[i] : "" }
    let query = SecretAttributes(itemClass: .genericPassword, service: word(1), account: word(2))
    func outcome(_ done: String, _ body: () throws(KeychainError) -> Void) -> String {
        do {
            try body()
            return done
        } catch .itemNotFound {
            return "not found"
        } catch .duplicateItem {
            return "duplicate"
        } catch {
            return "refused: \(error)"
        }
    }
    switch words.first {
    case "secret-add":
        var attributes = query
        attributes.label = "token of \(word(2))"
        attributes.group = word(4)
        return outcome("added") { () throws(KeychainError) in try Keychain.add(attributes, data: Array(word(3).utf8)) }
    case "secret-copy":
        var found = ""
        let result = outcome("found") { () throws(KeychainError) in
            let item = try Keychain.copyMatching(query)
            found = " " + String(decoding: item.data?.copyBytes() ?? [], as: UTF8.self) + " in " + item.attributes.group
        }
        return result + found
    case "secret-update":
        return outcome("updated") { () throws(KeychainError) in try Keychain.update(query, data: Array(word(3).utf8)) }
    case "secret-delete":
        return outcome("deleted") { () throws(KeychainError) in try Keychain.delete(query) }
    default:
        return nil
    }
}
