/// How a user names a camera with `--device`: a node or link path, the card
/// name the driver reports, or the USB vendor and product (and serial). Every
/// form but a plain node path survives re-enumeration (`/dev/video0` today,
/// `/dev/video2` after a replug); it is resolved at open and again at every
/// reconnect.
public enum DeviceName: Hashable, Sendable, CustomStringConvertible {
    /// A path: /dev/videoN, or a symlink to one (/dev/v4l/by-id/..., /dev/v4l/by-path/..., a udev rule's name).
    case path(String)
    /// The `card` string of VIDIOC_QUERYCAP ("vivid", "HD Pro Webcam C920").
    case card(String)
    /// `usb:VID:PID[:SERIAL]`, as sysfs gives the camera's USB device.
    case usb(USBID)

    /// `usb:046d:0825`, `usb:046d:0825:1A2B3C`: hexadecimal ids, the serial as sysfs spells it.
    public struct USBID: Hashable, Sendable, CustomStringConvertible {
        public var vendor: UInt16
        public var product: UInt16
        public var serial: String?

        public init(vendor: UInt16, product: UInt16, serial: String? = nil) {
            self.vendor = vendor
            self.product = product
            self.serial = serial
        }

        public var description: String {
            "usb:\(hex4(vendor)):\(hex4(product))" + (serial.map { ":\($0)" } ?? "")
        }

        /// Whether a device with these ids (and serial) is this one; without a serial, any serial matches.
        func matches(_ other: USBID) -> Bool {
            vendor == other.vendor && product == other.product && (serial == nil || serial == other.serial)
        }
    }

    /// What was wrong with a `--device` text, for the usage error.
    public struct ParseError: Error, Hashable, Sendable, CustomStringConvertible {
        public var text: String
        public var description: String {
            "--device \(text): a USB camera is named usb:VID:PID or usb:VID:PID:SERIAL, with 4 hexadecimal digits each (e.g. usb:046d:0825)"
        }
    }

    /// Anything with a '/' is a path; `usb:` starts a USB id; the rest is a card name.
    public init(parsing text: String) throws(ParseError) {
        if text.contains("/") {
            self = .path(text)
            return
        }
        if text.lowercased().hasPrefix("usb:") {
            let parts = text.dropFirst(4).split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count >= 2, parts[0].count == 4, parts[1].count == 4,
                  let vendor = UInt16(parts[0], radix: 16), let product = UInt16(parts[1], radix: 16),
                  parts.count == 2 || !parts[2].isEmpty else { throw ParseError(text: text) }
            self = .usb(USBID(vendor: vendor, product: product, serial: parts.count == 3 ? String(parts[2]) : nil))
            return
        }
        self = .card(text)
    }

    public var description: String {
        switch self {
        case .path(let p): p
        case .card(let c): c
        case .usb(let id): id.description
        }
    }
}

private func hex4(_ value: UInt16) -> String {
    let digits = String(value, radix: 16)
    return String(repeating: "0", count: 4 - digits.count) + digits
}
