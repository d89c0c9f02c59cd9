import ExtensionProtocol
import SupervisorCore

extension Daemon {
    /// An extension asks to open `url` (docs/extension-model.md, "Opening a URL").
    func openURL(_ url: String, tag: UInt32, from p: SupervisedProcess) {
        extensions.send(.answer(tag: tag, failure: .internalError, text: "not built yet"), to: p)
    }
}
