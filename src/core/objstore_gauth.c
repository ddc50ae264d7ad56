/* objstore_gauth.c - access tokens for Google Cloud Storage from the credentials Google's own
 * clients read (objstore_int.h): a service account's key (a JWT it signs with RS256, exchanged
 * at its token_uri: RFC 7523) or an authorized user's refresh token (RFC 6749's refresh grant).
 * Signing is OpenSSL's; the exchange a libcurl POST. */
#include "objstore_int.h"

#include "../common/alloc.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SCOPE "https://www.googleapis.com/auth/devstorage.read_only"
#define DEFAULT_TOKEN_URI "https://oauth2.googleapis.com/token"

static void b64url(nr_buf_t *b, const void *p, size_t n)
{
    unsigned char *out = nr_malloc(4 * ((n + 2) / 3) + 1);
    int len = EVP_EncodeBlock(out, p, (int)n);
    for (int i = 0; i < len; i++)
        if (out[i] == '+')
            out[i] = '-';
        else if (out[i] == '/')
            out[i] = '_';
    while (len > 0 && out[len - 1] == '=')
        len--;
    nr_buf_append(b, out, (size_t)len);
    free(out);
}

/* RS256 of data with the PEM private key, base64url-appended to b. */
static nr_status_t *sign(nr_buf_t *b, const char *pem, const char *data, size_t len)
{
    BIO *bio = BIO_new_mem_buf(pem, -1);
    EVP_PKEY *key = bio ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL) : NULL;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    size_t n = 0;
    unsigned char *sig = NULL;
    bool ok = key != NULL && ctx != NULL &&
              EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, key) == 1 &&
              EVP_DigestSign(ctx, NULL, &n, (const unsigned char *)data, len) == 1 &&
              (sig = nr_malloc(n)) != NULL &&
              EVP_DigestSign(ctx, sig, &n, (const unsigned char *)data, len) == 1;
    if (ok)
        b64url(b, sig, n);
    free(sig);
    EVP_MD_CTX_free(ctx);
    EVP_PKEY_free(key);
    BIO_free(bio);
    return ok ? NULL
              : nr_status_new(NR_INTERNAL, "the service account's private_key could not sign "
                                           "(not an RSA key in PEM?)");
}

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
    nr_buf_t *b = arg;
    if (b->len + size * n > (1u << 20))
        return 0;
    nr_buf_append(b, p, size * n);
    return size * n;
}

static nr_status_t *post_form(const char *url, const char *form, nr_buf_t *out, long *status)
{
    CURL *c = curl_easy_init();
    if (c == NULL)
        return nr_status_new(NR_INTERNAL, "unable to start libcurl");
    char err[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, form);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 60000L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, err);
    CURLcode rc = curl_easy_perform(c);
    *status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    curl_easy_cleanup(c);
    if (rc != CURLE_OK)
        return nr_status_new(NR_INTERNAL, "failed to get a Google access token from %s: %s", url,
                             err[0] ? err : curl_easy_strerror(rc));
    return NULL;
}

static char *str(const nr_jv_t *obj, const char *key)
{
    return nr_os_jv_string(nr_jv_get(obj, key));
}

/* The grant's form for the credentials in root; NULL with *st set when they cannot make one. */
static char *grant(const nr_jv_t *root, const char *uri, nr_status_t **st)
{
    char *type = str(root, "type"), *form = NULL;
    *st = NULL;
    if (type != NULL && !strcmp(type, "service_account")) {
        char *email = str(root, "client_email"), *pem = str(root, "private_key");
        char *kid = str(root, "private_key_id");
        if (email == NULL || pem == NULL) {
            *st = nr_status_new(NR_INVALID_ARG, "the service account's key has no client_email "
                                                "or private_key");
        } else {
            nr_buf_t h, c, jwt;
            nr_buf_init(&h);
            nr_buf_init(&c);
            nr_buf_init(&jwt);
            nr_buf_puts(&h, "{\"alg\":\"RS256\",\"typ\":\"JWT\"");
            if (kid != NULL) {
                nr_buf_puts(&h, ",\"kid\":");
                nr_buf_json_str(&h, kid, strlen(kid));
            }
            nr_buf_putc(&h, '}');
            int64_t now = (int64_t)time(NULL);
            nr_buf_puts(&c, "{\"iss\":");
            nr_buf_json_str(&c, email, strlen(email));
            nr_buf_puts(&c, ",\"scope\":\"" SCOPE "\",\"aud\":");
            nr_buf_json_str(&c, uri, strlen(uri));
            nr_buf_printf(&c, ",\"iat\":%lld,\"exp\":%lld}", (long long)now,
                          (long long)now + 3600);
            b64url(&jwt, h.data, h.len);
            nr_buf_putc(&jwt, '.');
            b64url(&jwt, c.data, c.len);
            char *input = nr_strndup(jwt.data, jwt.len); /* header.claims, signed */
            nr_buf_putc(&jwt, '.');
            *st = sign(&jwt, pem, input, strlen(input));
            free(input);
            if (*st == NULL) {
                nr_buf_putc(&jwt, '\0');
                form = nr_asprintf("grant_type=urn%%3Aietf%%3Aparams%%3Aoauth%%3Agrant-type%%3A"
                                   "jwt-bearer&assertion=%s",
                                   jwt.data);
            }
            nr_buf_free(&h);
            nr_buf_free(&c);
            nr_buf_free(&jwt);
        }
        free(email);
        free(pem);
        free(kid);
    } else if (type != NULL && !strcmp(type, "authorized_user")) {
        char *id = str(root, "client_id"), *secret = str(root, "client_secret");
        char *refresh = str(root, "refresh_token");
        if (id == NULL || secret == NULL || refresh == NULL) {
            *st = nr_status_new(NR_INVALID_ARG, "the authorized user's credentials need "
                                                "client_id, client_secret and refresh_token");
        } else {
            char *e1 = nr_os_escape(id, false), *e2 = nr_os_escape(secret, false);
            char *e3 = nr_os_escape(refresh, false);
            form = nr_asprintf("grant_type=refresh_token&client_id=%s&client_secret=%s&"
                               "refresh_token=%s",
                               e1, e2, e3);
            free(e1);
            free(e2);
            free(e3);
        }
        free(id);
        free(secret);
        free(refresh);
    } else {
        *st = nr_status_new(NR_INVALID_ARG,
                            "Google credentials of type '%s' are not supported (service_account "
                            "and authorized_user are)",
                            type ? type : "");
    }
    free(type);
    return form;
}

nr_status_t *nr_os_google_token(const char *json, size_t len, char **token, int64_t *ttl)
{
    *token = NULL;
    *ttl = 0;
    nr_json_doc_t *doc = NULL;
    const nr_jv_t *root = NULL;
    nr_status_t *st = nr_json_parse(json, len, &doc, &root);
    if (st != NULL) {
        nr_status_t *w = nr_status_new(NR_INVALID_ARG, "the Google credentials are not JSON: %s",
                                       st->msg);
        nr_status_free(st);
        return w;
    }
    char *uri = str(root, "token_uri");
    if (uri == NULL)
        uri = nr_strdup(DEFAULT_TOKEN_URI);
    char *form = grant(root, uri, &st);
    nr_json_free(doc);
    doc = NULL;
    nr_buf_t body;
    nr_buf_init(&body);
    long status = 0;
    if (st == NULL)
        st = post_form(uri, form, &body, &status);
    free(form);
    const nr_jv_t *answer = NULL;
    if (st == NULL) {
        nr_status_t *bad = nr_json_parse(body.data ? body.data : "", body.len, &doc, &answer);
        if (bad != NULL) { /* not JSON: the status alone says what went wrong */
            nr_status_free(bad);
            doc = NULL;
            answer = NULL;
        }
    }
    if (st == NULL) {
        char *tok = answer ? str(answer, "access_token") : NULL;
        const nr_jv_t *exp = answer ? nr_jv_get(answer, "expires_in") : NULL;
        if (status == 200 && tok != NULL) {
            *token = tok;
            *ttl = exp != NULL && nr_jv_is_number(exp) ? (int64_t)nr_jv_number(exp) : 3600;
        } else {
            char *why = answer ? str(answer, "error_description") : NULL;
            if (why == NULL && answer != NULL)
                why = str(answer, "error");
            st = nr_status_new(NR_INTERNAL, "failed to get a Google access token from %s: HTTP "
                                            "%ld%s%s",
                               uri, status, why ? ": " : "", why ? why : "");
            free(why);
            free(tok);
        }
    }
    nr_json_free(doc);
    nr_buf_free(&body);
    free(uri);
    return st;
}
