// The built-in dtype table (csrc/engine/dtype/info.hpp).
#include <gtest/gtest.h>

#include <string>

#include "dtype/info.hpp"

using sw::DTypeCode;

TEST(DTypeInfo, TableOrderAndNames) {
  const auto table = sw::builtin_dtypes();
  ASSERT_EQ(table.size(), 7u);
  EXPECT_STREQ(table[0].name, "Any");
  EXPECT_STREQ(table[3].name, "Float32");
  EXPECT_STREQ(table[6].name, "Bool");
  for (const auto& row : table) EXPECT_STREQ(sw::dtype_name(row.code), row.name);
  EXPECT_STREQ(sw::dtype_name(DTypeCode::Compound), "CompoundDType");
  EXPECT_EQ(sw::dtype_info(DTypeCode::Compound), nullptr);
}

TEST(DTypeInfo, FromNameTakesNumpyNames) {
  EXPECT_EQ(sw::dtype_from_name("float32"), DTypeCode::Float32);
  EXPECT_EQ(sw::dtype_from_name("float64"), DTypeCode::Float64);
  EXPECT_EQ(sw::dtype_from_name("int32"), DTypeCode::Int32);
  EXPECT_EQ(sw::dtype_from_name("bool"), DTypeCode::Bool);
  EXPECT_EQ(sw::dtype_from_name("bool_"), DTypeCode::Bool);
  EXPECT_FALSE(sw::numpy_dtype_from_name("int64").has_value());
  EXPECT_FALSE(sw::numpy_dtype_from_name("Float32").has_value());
}

TEST(DTypeInfo, FromNameIsExact) {
  EXPECT_EQ(sw::dtype_from_name("Int32"), DTypeCode::Int32);
  EXPECT_EQ(sw::dtype_from_name("Floating"), DTypeCode::Floating);
  EXPECT_FALSE(sw::dtype_from_name("INT32").has_value());
  EXPECT_FALSE(sw::dtype_from_name("float16").has_value());
  EXPECT_FALSE(sw::dtype_from_name("Float3").has_value());
  EXPECT_FALSE(sw::dtype_from_name("CompoundDType").has_value());
  EXPECT_FALSE(sw::dtype_from_name("").has_value());
}

TEST(DTypeInfo, BitsAndKinds) {
  EXPECT_EQ(sw::dtype_info(DTypeCode::Float64)->bits, 64);
  EXPECT_EQ(sw::dtype_info(DTypeCode::Bool)->bits, 8);
  EXPECT_EQ(sw::dtype_info(DTypeCode::Integer)->bits, 0);
  EXPECT_TRUE(sw::dtype_is_simple(DTypeCode::Float32));
  EXPECT_TRUE(sw::dtype_is_simple(DTypeCode::Bool));
  EXPECT_FALSE(sw::dtype_is_simple(DTypeCode::Any));
  EXPECT_FALSE(sw::dtype_is_simple(DTypeCode::Compound));
  EXPECT_TRUE(sw::dtype_is_category(DTypeCode::Floating));
  EXPECT_FALSE(sw::dtype_is_category(DTypeCode::Compound));
}

TEST(DTypeInfo, Hierarchy) {
  EXPECT_FALSE(sw::dtype_supertype(DTypeCode::Any).has_value());
  EXPECT_EQ(sw::dtype_supertype(DTypeCode::Float32), DTypeCode::Floating);
  EXPECT_EQ(sw::dtype_supertype(DTypeCode::Int32), DTypeCode::Integer);
  EXPECT_EQ(sw::dtype_supertype(DTypeCode::Bool), DTypeCode::Any);
  EXPECT_EQ(sw::dtype_supertype(DTypeCode::Compound), DTypeCode::Any);
  EXPECT_TRUE(sw::dtype_is_subtype_of(DTypeCode::Float32, DTypeCode::Float32));
  EXPECT_TRUE(sw::dtype_is_subtype_of(DTypeCode::Float32, DTypeCode::Floating));
  EXPECT_TRUE(sw::dtype_is_subtype_of(DTypeCode::Float32, DTypeCode::Any));
  EXPECT_FALSE(sw::dtype_is_subtype_of(DTypeCode::Float32, DTypeCode::Integer));
  EXPECT_FALSE(sw::dtype_is_subtype_of(DTypeCode::Floating, DTypeCode::Float64));
  EXPECT_TRUE(sw::dtype_is_subtype_of(DTypeCode::Compound, DTypeCode::Any));
  EXPECT_FALSE(sw::dtype_is_subtype_of(DTypeCode::Compound, DTypeCode::Floating));
  // Compound identity is the binding's (the classes): never equal here.
  EXPECT_FALSE(sw::dtype_is_subtype_of(DTypeCode::Compound, DTypeCode::Compound));
}

TEST(DTypeInfo, DifferentiableAndNumpyNames) {
  EXPECT_TRUE(sw::dtype_is_differentiable(DTypeCode::Float32));
  EXPECT_TRUE(sw::dtype_is_differentiable(DTypeCode::Floating));
  EXPECT_FALSE(sw::dtype_is_differentiable(DTypeCode::Int32));
  EXPECT_FALSE(sw::dtype_is_differentiable(DTypeCode::Compound));
  EXPECT_STREQ(sw::numpy_dtype_name(DTypeCode::Float32), "float32");
  EXPECT_STREQ(sw::numpy_dtype_name(DTypeCode::Floating), "float64");
  EXPECT_STREQ(sw::numpy_dtype_name(DTypeCode::Bool), "bool");
  EXPECT_STREQ(sw::numpy_dtype_name(DTypeCode::Compound), "object");
}
