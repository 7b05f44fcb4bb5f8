/**
 * Nominal ("branded") types: a `PodUid` and a `NetnsId` are both strings at run time, but the
 * compiler keeps them apart so one can never be passed where the other is meant.
 */
declare const brand: unique symbol;
export type Brand<T, B extends string> = T & { readonly [brand]: B };
