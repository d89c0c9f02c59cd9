import ExtensionProtocol

/// Which content an extension can handle, from its manifest's `activation` key (modelled on
/// Apple's `NSExtensionActivationRule`): a share sheet's discovery query lists the extensions
/// whose rule accepts what it holds.
///
/// A rule accepts content when the content is not empty and every kind in it is allowed, up
/// to its count: `text` needs `text: true`, `url`/`image`/`file` need at most `urls`/`images`/
/// `files`, and a MIME type needs a `contentTypes` entry for it (exact, or `type/*`) whose
/// `max` is at least the count. Kinds the rule does not name are refused.
public struct ActivationRule: Equatable, Sendable, Encodable {
    /// Plain text.
    public var text = false
    /// Most web URLs (0: none).
    public var urls = 0
    /// Most images (0: none).
    public var images = 0
    /// Most files of any type (0: none).
    public var files = 0
    /// Most items per MIME type (`application/pdf`, or `image/*` for any image type).
    public var contentTypes: [ContentTypeLimit] = []

    /// A rule with these limits; with the defaults it accepts no content.
    public init(text: Bool = false, urls: Int = 0, images: Int = 0, files: Int = 0, contentTypes: [ContentTypeLimit] = []) {
        self.text = text
        self.urls = urls
        self.images = images
        self.files = files
        self.contentTypes = contentTypes
    }

    /// One `contentTypes` entry: `{"type": "application/pdf", "max": 1}`.
    public struct ContentTypeLimit: Equatable, Sendable, Encodable {
        /// The MIME type, exact (`application/pdf`) or a whole top-level type (`image/*`).
        public var type: String
        /// The most items of this type the rule accepts.
        public var max: Int
        /// An entry accepting up to `max` items of `type`.
        public init(type: String, max: Int) {
            self.type = type
            self.max = max
        }

        /// Whether this entry names `mimeType` exactly or by `type/*`.
        func covers(_ mimeType: String) -> Bool {
            if type == mimeType { return true }
            guard type.hasSuffix("/*") else { return false }
            return mimeType.hasPrefix(type.dropLast())
        }
    }

    /// Whether the rule accepts `content` (see the type's description).
    public func accepts(_ content: ActivationContent) -> Bool {
        guard !content.counts.isEmpty else { return false }
        return content.counts.allSatisfy { kind, count in
            switch kind {
            case "text": text
            case "url": Int(count) <= urls
            case "image": Int(count) <= images
            case "file": Int(count) <= files
            default: contentTypes.contains { $0.covers(kind) && Int(count) <= $0.max }
            }
        }
    }
}
