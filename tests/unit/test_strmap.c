/* test_strmap.c - common/strmap: SipHash-1-3 against its reference values,
 * inserts and lookups (duplicates, empty and binary keys, growth), and many
 * keys at once.
 */
#include "../../src/common/alloc.h"
#include "../../src/common/strmap.h"
#include "nr_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

NR_TEST(siphash13_reference_values)
{
    /* key 00 01 .. 0f, message 00 01 .. (the reference implementation's vectors) */
    unsigned char key[16], msg[16];
    for (int i = 0; i < 16; i++)
        key[i] = msg[i] = (unsigned char)i;
    uint64_t k0, k1;
    memcpy(&k0, key, 8);
    memcpy(&k1, key + 8, 8);
    EXPECT_EQ_U64(nr_siphash13(k0, k1, msg, 0), 0xabac0158050fc4dcull);
    EXPECT_EQ_U64(nr_siphash13(k0, k1, msg, 8), 0x369095118d299a8eull);
    EXPECT_EQ_U64(nr_siphash13(k0, k1, msg, 15), 0xd320d86d2a519956ull);
}

NR_TEST(put_get_duplicates_and_odd_keys)
{
    nr_strmap_t m = {0};
    uint32_t v = 99, old = 99;
    EXPECT_FALSE(nr_strmap_get(&m, "a", 1, &v)); /* empty, never allocated */
    EXPECT_TRUE(nr_strmap_put(&m, "INPUT0", 6, 0, NULL));
    EXPECT_TRUE(nr_strmap_put(&m, "INPUT1", 6, 1, NULL));
    EXPECT_TRUE(nr_strmap_put(&m, "", 0, 2, NULL));
    EXPECT_TRUE(nr_strmap_put(&m, "a\0b", 3, 3, NULL)); /* NUL inside: length decides */
    EXPECT_TRUE(nr_strmap_put(&m, "a", 1, 4, NULL));
    EXPECT_FALSE(nr_strmap_put(&m, "INPUT1", 6, 7, &old));
    EXPECT_EQ_U64(old, 1);
    EXPECT_EQ_U64(m.n, 5);
    EXPECT_TRUE(nr_strmap_get(&m, "INPUT1xyz", 6, &v) && v == 1); /* only len bytes count */
    EXPECT_TRUE(nr_strmap_get(&m, "", 0, &v) && v == 2);
    EXPECT_TRUE(nr_strmap_get(&m, NULL, 0, &v) && v == 2);
    EXPECT_TRUE(nr_strmap_get(&m, "a\0b", 3, &v) && v == 3);
    EXPECT_TRUE(nr_strmap_get(&m, "a", 1, &v) && v == 4);
    EXPECT_FALSE(nr_strmap_get(&m, "INPUT", 5, &v));
    EXPECT_FALSE(nr_strmap_get(&m, "a\0c", 3, &v));
    nr_strmap_free(&m);
    EXPECT_FALSE(nr_strmap_get(&m, "a", 1, &v));
    EXPECT_TRUE(nr_strmap_put(&m, "a", 1, 5, NULL)); /* usable again after free */
    EXPECT_TRUE(nr_strmap_get(&m, "a", 1, &v) && v == 5);
    nr_strmap_free(&m);
}

/* 300,000 keys: every one found with its value through each growth, the
 * duplicates refused. Linear probing at most half full keeps it O(n). */
NR_TEST(many_keys)
{
    enum { N = 300000 };
    char (*names)[16] = nr_malloc(N * sizeof(*names));
    size_t *lens = nr_malloc(N * sizeof(size_t));
    nr_strmap_t m = {0};
    for (uint32_t i = 0; i < N; i++) {
        lens[i] = (size_t)snprintf(names[i], sizeof(names[i]), "X%u", i);
        ASSERT_TRUE(nr_strmap_put(&m, names[i], lens[i], i, NULL));
    }
    EXPECT_EQ_U64(m.n, N);
    EXPECT_TRUE(m.cap >= 2 * (size_t)N);
    size_t bad = 0;
    for (uint32_t i = 0; i < N; i++) {
        uint32_t v, old;
        if (!nr_strmap_get(&m, names[i], lens[i], &v) || v != i)
            bad++;
        if (nr_strmap_put(&m, names[i], lens[i], 0, &old) || old != i)
            bad++;
    }
    EXPECT_EQ_U64(bad, 0);
    nr_strmap_t r = {0};
    nr_strmap_reserve(&r, 1000);
    size_t cap = r.cap;
    for (uint32_t i = 0; i < 1000; i++)
        nr_strmap_put(&r, names[i], lens[i], i, NULL);
    EXPECT_EQ_U64(r.cap, cap); /* reserved: no growth */
    nr_strmap_free(&r);
    nr_strmap_free(&m);
    free(names);
    free(lens);
}

/* Two maps draw their own keys: the same name lands in unrelated places. */
NR_TEST(maps_have_their_own_keys)
{
    nr_strmap_t a = {0}, b = {0};
    nr_strmap_put(&a, "x", 1, 0, NULL);
    nr_strmap_put(&b, "x", 1, 0, NULL);
    EXPECT_TRUE(a.k0 != b.k0 || a.k1 != b.k1);
    nr_strmap_free(&a);
    nr_strmap_free(&b);
}

NR_TEST_MAIN()
