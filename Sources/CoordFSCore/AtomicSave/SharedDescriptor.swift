/// A descriptor several handles read or write through, closed after its last user.
///
/// Sendable: immutable.
public final class SharedDescriptor: Sendable {
    public let descriptor: OwnedDescriptor

    public init(_ descriptor: consuming OwnedDescriptor) {
        self.descriptor = descriptor
    }

    public var raw: Int32 { descriptor.raw }
}
