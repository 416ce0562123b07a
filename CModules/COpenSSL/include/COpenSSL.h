// COpenSSL: the thin C shim for OpenSSL (Debian libssl-dev).
//
// Why it exists: Swift imports OpenSSL's headers only through a module. STUN
// message integrity (HMAC-SHA1) uses it now; DTLS with use_srtp will.
// No logic lives here.
#ifndef COPENSSL_H
#define COPENSSL_H

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#endif
