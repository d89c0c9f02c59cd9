import ExtensionProtocol
import SupervisorCore
import Testing

/// Who finds which secret items, and where an add goes (SecretAccess, SecretAttributes: pure).
@Suite struct SecretAccessTests {
    static let item = SecretAttributes(itemClass: .genericPassword, group: "group.a", service: "api", label: "token")

    @Test func aQueryFindsOnlyItemsOfTheCallersGroupsAndAnAbsentAttributeIsAnEmptyOne() {
        #expect(SecretAccess.finds(SecretAttributes(itemClass: .any), item: Self.item, callerGroups: ["group.a"]))
        #expect(!SecretAccess.finds(SecretAttributes(itemClass: .any), item: Self.item, callerGroups: ["group.b"]), "another group's item does not exist")
        #expect(!SecretAccess.finds(SecretAttributes(itemClass: .any, group: "group.a"), item: Self.item, callerGroups: ["group.b"]))
        #expect(!SecretAccess.finds(SecretAttributes(itemClass: .internetPassword), item: Self.item, callerGroups: ["group.a"]))
        // The item has no account: a query for the empty account finds it, as an add of it is a duplicate.
        #expect(SecretAccess.finds(SecretAttributes(itemClass: .genericPassword, account: ""), item: Self.item, callerGroups: ["group.a"]))
        #expect(SecretAttributes(itemClass: .genericPassword, group: "group.a", service: "api", account: "").identity == Self.item.identity)
        #expect(!SecretAccess.finds(SecretAttributes(itemClass: .genericPassword, account: "bob"), item: Self.item, callerGroups: ["group.a"]))
    }

    @Test func anAddGoesToTheGroupItNamesIfItIsTheCallersElseTheFirst() {
        #expect(SecretAccess.addGroup("", callerGroups: ["group.a", "group.b"]) == .success("group.a"))
        #expect(SecretAccess.addGroup("group.b", callerGroups: ["group.a", "group.b"]) == .success("group.b"))
        #expect(
            SecretAccess.addGroup("group.c", callerGroups: ["group.a"]) == .failure(SecretRefusal(.notPermitted, "'group.c' is not one of the caller's groups"))
        )
        #expect((try? SecretAccess.addGroup("", callerGroups: []).get()) == nil)
        #expect(SecretAccess.addProblem(SecretAttributes(itemClass: .any), dataCount: 1) != nil)
        #expect(SecretAccess.addProblem(Self.item, dataCount: 0) != nil)
        #expect(SecretAccess.addProblem(SecretAttributes(itemClass: .genericPassword, server: "s"), dataCount: 1) != nil)
        #expect(SecretAccess.addProblem(Self.item, dataCount: 1) == nil)
    }
}
