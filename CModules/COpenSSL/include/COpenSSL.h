// COpenSSL: the thin C shim for OpenSSL (Debian libssl-dev).
//
// Why it exists: Swift imports OpenSSL's headers only through a module, and
// several entry points are macros (over SSL_ctrl, or variadic); the inline
// wrappers below are exactly those macros. STUN integrity (HMAC-SHA1),
// DTLS 1.2 with use_srtp and SRTP (AES, GCM128, HMAC-SHA1) use it. No logic lives here.
#ifndef COPENSSL_H
#define COPENSSL_H

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/modes.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

static inline EVP_PKEY *copenssl_generate_p256(void) {
    return EVP_EC_gen("P-256");
}

static inline int copenssl_ctx_require_dtls12(SSL_CTX *ctx) {
    return (int)SSL_CTX_set_min_proto_version(ctx, DTLS1_2_VERSION);
}

/* OpenSSL builds this option from a macro Swift cannot import. */
static inline void copenssl_no_query_mtu(SSL *ssl) {
    SSL_set_options(ssl, SSL_OP_NO_QUERY_MTU);
}

static inline long copenssl_set_link_mtu(SSL *ssl, long mtu) {
    return DTLS_set_link_mtu(ssl, mtu);
}

static inline long copenssl_dtls_get_timeout(SSL *ssl, struct timeval *out) {
    return DTLSv1_get_timeout(ssl, out);
}

static inline long copenssl_dtls_handle_timeout(SSL *ssl) {
    return DTLSv1_handle_timeout(ssl);
}

static inline long copenssl_pending(BIO *bio) {
    return BIO_ctrl_pending(bio);
}

/* TLS over TCP for the WHIP client (HTTPS): SNI and the protocol floor are
   macros over SSL_ctrl. */
static inline int copenssl_set_sni(SSL *ssl, const char *name) {
    return (int)SSL_set_tlsext_host_name(ssl, name);
}

static inline int copenssl_ctx_require_tls12(SSL_CTX *ctx) {
    return (int)SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
}

/* SRTP's HMAC-SHA1 keeps the keyed inner and outer SHA-1 states and starts each packet from a
   copy of them (a struct copy, no allocation; EVP's digest copies allocate). OpenSSL 3 deprecates
   these low-level calls without removing them; the warning is silenced here only. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static inline void copenssl_sha1_init(SHA_CTX *c) { SHA1_Init(c); }
static inline void copenssl_sha1_update(SHA_CTX *c, const void *data, size_t count) { SHA1_Update(c, data, count); }
static inline void copenssl_sha1_final(SHA_CTX *c, unsigned char *digest) { SHA1_Final(digest, c); }
#pragma GCC diagnostic pop


#endif
